package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/spec"
)

// Schema returns sk's input schema as a JSON object fit for a tool API:
// "$schema" and "$id" (rejected or ignored by vendors' tool APIs) are
// dropped and a missing "type" is "object".
func Schema(sk *spec.Skill) (map[string]any, error) {
	var schema map[string]any
	if err := json.Unmarshal(sk.Input.Schema, &schema); err != nil {
		return nil, fmt.Errorf("input schema of %q: %w", sk.Name, err)
	}
	if schema == nil {
		return nil, fmt.Errorf("input schema of %q: not a JSON object", sk.Name)
	}
	delete(schema, "$schema")
	delete(schema, "$id")
	if _, ok := schema["type"]; !ok {
		schema["type"] = "object"
	}
	return schema, nil
}

// Tool returns the MCP tool definition of sk, exactly as the server lists
// it: name, description, input schema, and the annotations readOnlyHint
// (no workspace) and openWorldHint (the manifest asks for network hosts).
func Tool(sk *spec.Skill) (*mcp.Tool, error) {
	schema, err := Schema(sk)
	if err != nil {
		return nil, err
	}
	openWorld := len(sk.Manifest.Network.Hosts) > 0
	t := &mcp.Tool{
		Name:        sk.Name,
		Title:       sk.Metadata["title"],
		Description: sk.Description,
		InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:  sk.Manifest.Filesystem.Workspace == "" || sk.Manifest.Filesystem.Workspace == spec.WorkspaceNone,
			OpenWorldHint: &openWorld,
		},
	}
	return t, nil
}
