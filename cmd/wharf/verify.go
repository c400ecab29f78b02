package main

import (
	"context"
	"errors"
)

// PLACEHOLDER: replaced by the owner of "wharf verify".
func runVerify(ctx context.Context, args []string) error {
	return errors.New("verify: not implemented yet")
}
