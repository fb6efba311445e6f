//go:build !race

package test

// raceBuild is set when the tests run under the race detector.
const raceBuild = false
