// Package mcpserver serves skills as Model Context Protocol tools, with
// the official Go SDK (github.com/modelcontextprotocol/go-sdk): one tool
// per skill, each call run in a fresh sandbox by the skill runner with the
// operator's grants, which a call cannot widen. `skillrun mcp serve` runs
// it over stdio or streamable HTTP.
package mcpserver
