//go:build tools

// Package tools pins the commands this wrapper module builds, so that go mod tidy keeps them.
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
