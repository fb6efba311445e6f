//go:build !linux

package filestore

import "testing"

func dropActive(t *testing.T, fs *FileStore) { t.Skip("no page-cache control here") }
