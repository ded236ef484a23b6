package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
)

// plainFormatter is the log format for a person at a terminal (text logs
// to stderr): one line per entry, "skillrun: MESSAGE", warnings and debug
// lines marked, fields as key=value. Log files (--log) keep logrus' text
// format (level=error msg=...), which containerd and podman read, and
// --log-format json gives JSON lines anywhere.
type plainFormatter struct{}

// Format implements logrus.Formatter.
func (plainFormatter) Format(en *logrus.Entry) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("skillrun: ")
	switch en.Level {
	case logrus.WarnLevel:
		b.WriteString("warning: ")
	case logrus.DebugLevel, logrus.TraceLevel:
		b.WriteString("debug: ")
	}
	b.WriteString(strings.TrimRight(en.Message, "\n"))
	keys := make([]string, 0, len(en.Data))
	for k := range en.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := fmt.Sprint(en.Data[k])
		if v == "" || strings.ContainsAny(v, " \t\"=") {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
