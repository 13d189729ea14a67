//go:build tools

// Package tools pins the commands this wrapper module builds, so that go mod tidy keeps them.
package tools

import (
	_ "filippo.io/age/cmd/age-keygen"
	_ "github.com/getsops/sops/v3/cmd/sops"
)
