//go:build tools

// Package tools pins the command this wrapper module builds, so that go mod tidy keeps it.
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
