package reports

import (
	"encoding/json"
	"fmt"
	"io"
)

// ReadJSON reads a report.json that WriteJSON wrote. It returns an error
// when the input is not JSON of a report, when its schema_version is not
// SchemaVersion, or (wrapping ErrInvalid) when the report does not pass
// Validate.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("read json: %w", err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("read json: schema_version %d: this noisysim reads version %d", r.SchemaVersion, SchemaVersion)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("read json: %w", err)
	}
	return &r, nil
}

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
