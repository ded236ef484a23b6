// Package mcpserver serves skills as MCP tools with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): one tool per skill, each call
// run in a fresh sandbox by the skill runner (runner.Run), the
// result envelope returned as structured content.
//
// The package never writes to stdout (the stdio transport owns it) and
// never exits the process; errors are returned.
package mcpserver
