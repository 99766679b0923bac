//go:build !linux

package main

// denyLandlock does nothing where there is no Landlock.
func denyLandlock() {}
