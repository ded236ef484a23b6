//go:build !linux && !runtimeonly

package main

import "github.com/modelcontextprotocol/go-sdk/mcp"

// stdioTransport is the MCP SDK's transport over stdin and stdout (on
// Linux, a pipe on stdin is read through Go's poller: mcpstdio_linux.go).
func stdioTransport() mcp.Transport { return &mcp.StdioTransport{} }
