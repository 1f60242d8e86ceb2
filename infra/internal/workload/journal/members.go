package journal

import (
	"bytes"
	"encoding/json"
	"errors"
)

var errNotAnObject = errors.New("not a JSON object")

// members calls f with the key (decoded) and the
// value bytes of each top-level member of the JSON object raw, without
// decoding anything, and stops early when f returns false. raw is
// expected valid (DecodeRecordRaw checks it); what is not an object, or
// ends early, is an error, never a panic.
func members(raw []byte, f func(key, value []byte) bool) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return errNotAnObject
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return errNotAnObject
		}
		keyEnd := stringEnd(raw, i)
		if keyEnd < 0 {
			return errNotAnObject
		}
		key := raw[i+1 : keyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			// Written with escapes: compared as its decoded self.
			var k string
			if err := json.Unmarshal(raw[i:keyEnd], &k); err != nil {
				return err
			}
			key = []byte(k)
		}
		i = skipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' {
			return errNotAnObject
		}
		start := skipSpace(raw, i+1)
		end := valueEnd(raw, start)
		if end < 0 {
			return errNotAnObject
		}
		if !f(key, raw[start:end]) {
			return nil
		}
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return errNotAnObject
		}
		switch raw[i] {
		case '}':
			return nil
		case ',':
			i = skipSpace(raw, i+1)
		default:
			return errNotAnObject
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string starting at b[i] (a quote),
// -1 when it does not end.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// valueEnd is the index just past the value starting at b[i], -1 when it
// does not end.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				if i = stringEnd(b, i); i < 0 {
					return -1
				}
				i-- // the loop's i++ steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default: // a number, true, false or null
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return i
	}
}
