package reports

import "io"

// renderers lists every renderer under its file name.
func renderers() map[string]func(io.Writer, *Report) error {
	return map[string]func(io.Writer, *Report) error{
		"report.json": WriteJSON,
		"report.md":   WriteMarkdown,
		"junit.xml":   WriteJUnit,
		"text":        func(w io.Writer, r *Report) error { return WriteText(w, r, TextOptions{}) },
	}
}
