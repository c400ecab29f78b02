package main

import (
	"context"
	"errors"
)

// PLACEHOLDER: replaced by the owner of "wharf bench".
func runBench(ctx context.Context, args []string) error {
	return errors.New("bench: not implemented yet")
}
