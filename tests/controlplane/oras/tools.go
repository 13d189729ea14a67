//go:build tools

// Package tools pins the command this wrapper module builds, so that go mod tidy keeps it.
package tools

import (
	_ "oras.land/oras/cmd/oras"
)
