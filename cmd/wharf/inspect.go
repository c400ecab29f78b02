package main

import (
	"context"
	"errors"
)

// PLACEHOLDER: replaced by the owner of "wharf inspect".
func runInspect(ctx context.Context, args []string) error {
	return errors.New("inspect: not implemented yet")
}
