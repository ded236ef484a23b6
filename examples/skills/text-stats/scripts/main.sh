#!/bin/sh
# Word statistics of the "text" field of the JSON object on stdin.
set -eu
awk '
function unescape(s,    out, i, c, n) {
	out = ""
	n = length(s)
	for (i = 1; i <= n; i++) {
		c = substr(s, i, 1)
		if (c != "\\") { out = out c; continue }
		i++
		c = substr(s, i, 1)
		if (c == "n") out = out "\n"
		else if (c == "t") out = out "\t"
		else if (c == "r") out = out "\r"
		else if (c == "u") { out = out "?"; i += 4 }
		else out = out c
	}
	return out
}
function jstr(s) {
	gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s)
	return "\"" s "\""
}
{ doc = doc $0 "\n" }
END {
	# The schema guarantees an object with a string "text" and an optional
	# integer "top"; extract them without a JSON library.
	top = 5
	if (match(doc, /"top"[ \t\r\n]*:[ \t\r\n]*[0-9]+/)) {
		t = substr(doc, RSTART, RLENGTH); sub(/.*:[ \t\r\n]*/, "", t); top = t + 0
	}
	if (!match(doc, /"text"[ \t\r\n]*:[ \t\r\n]*"([^"\\]|\\.)*"/)) {
		print "text-stats: no \"text\" string in the input" > "/dev/stderr"
		exit 2
	}
	raw = substr(doc, RSTART, RLENGTH)
	sub(/^"text"[ \t\r\n]*:[ \t\r\n]*"/, "", raw)
	text = unescape(substr(raw, 1, length(raw) - 1))
	chars = length(text)
	lines = (chars == 0) ? 0 : split(text, ls, "\n")
	if (chars > 0 && substr(text, chars, 1) == "\n") lines--
	words = 0
	lower = tolower(text)
	gsub(/[^a-z0-9'\'']+/, " ", lower)
	n = split(lower, ws, " ")
	for (i = 1; i <= n; i++) if (ws[i] != "") { words++; freq[ws[i]]++ }
	# Selection of the top words: highest count, then alphabetical.
	out = ""
	for (k = 0; k < top; k++) {
		best = ""
		for (w in freq) if (best == "" || freq[w] > freq[best] || freq[w] == freq[best] && w < best) best = w
		if (best == "") break
		out = out (k ? "," : "") "[" jstr(best) "," freq[best] "]"
		delete freq[best]
	}
	printf "{\"lines\":%d,\"words\":%d,\"chars\":%d,\"top_words\":[%s]}\n", lines, words, chars, out
}'
