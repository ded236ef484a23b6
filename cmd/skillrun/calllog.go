//go:build !runtimeonly

package main

import (
	"github.com/sirupsen/logrus"

	"github.com/skillrun/skillrun/mcpserver"
)

// The long-running servers log one line per call at info, with
// lower_snake fields (text or JSON by --log-format): never the content of
// a call's input or output.

// logMCPCall is mcpserver's Options.Observe: one line per tool call.
func (e *env) logMCPCall(c mcpserver.Call) {
	f := logrus.Fields{
		"tool":        c.Tool,
		"duration_ms": c.Duration.Milliseconds(),
		"outcome":     c.Outcome(),
	}
	if c.Session != "" {
		f["session"] = c.Session
	}
	if c.Tool == mcpserver.WriteFileTool || c.Tool == mcpserver.ReadFileTool {
		e.log.WithFields(f).Info("mcp tool call")
		return
	}
	f["skill"] = c.Skill
	f["warm"] = c.Warm
	if c.Command != "" {
		f["command"] = c.Command
	}
	if c.Result != nil {
		f["exit_code"] = c.Result.ExitCode
		if c.Result.StoppedReason != "" {
			f["stopped_reason"] = c.Result.StoppedReason
		}
	}
	e.log.WithFields(f).Info("mcp tool call")
}
