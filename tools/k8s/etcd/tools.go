//go:build tools

// Package tools records the command this wrapper module builds, so that `go mod tidy` keeps its
// dependencies in go.mod and go.sum. The tag keeps it out of every real build.
package tools

import _ "go.etcd.io/etcd/server/v3"
