package main

import (
	"context"
	"errors"
)

// PLACEHOLDER: replaced by the owner of "wharf serve".
func runServe(ctx context.Context, args []string) error {
	return errors.New("serve: not implemented yet")
}
