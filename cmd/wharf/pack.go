package main

import (
	"context"
	"errors"
)

// PLACEHOLDER: replaced by the owner of "wharf pack".
func runPack(ctx context.Context, args []string) error {
	return errors.New("pack: not implemented yet")
}
