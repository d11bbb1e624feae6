package reports

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes r to w as indented JSON (report.json), slices in the
// canonical order (see the package doc), schema_version SchemaVersion. It returns an error wrapping
// ErrInvalid if r does not pass Validate, or the writer's error.
func WriteJSON(w io.Writer, r *Report) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // keep "<=" readable
	if err := enc.Encode(normalized(r)); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
