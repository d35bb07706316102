//go:build amd64 || arm64

package registry

import "unsafe"

const haveFP = true

// getfp returns the frame pointer of its caller.
func getfp() unsafe.Pointer
