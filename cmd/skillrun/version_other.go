//go:build !linux

package main

func versionExtra() []string { return nil }
