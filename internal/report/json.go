// Package report turns a bufferbloat test result into files and text: the
// --json file and its reader, the human summary, the before/after comparison
// and the live progress line. Plots and flent files live in the plot and
// flent packages next to this one.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/sizelimit"
)

// WriteJSON writes r as indented JSON, the format --json documents.
func WriteJSON(w io.Writer, r *bbresult.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a file written by WriteJSON. It refuses files of another
// schema version rather than guessing at fields whose meaning changed, and
// files from other tools, with an error that says which one it was.
func ReadJSON(rd io.Reader) (*bbresult.Result, error) {
	data, err := sizelimit.Read(rd, "result", sizelimit.Result, "sqmkit test result")
	if err != nil {
		return nil, err
	}
	var head struct {
		SchemaVersion *int   `json:"schema_version"`
		Tool          string `json:"tool"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a sqmkit result (want the JSON written by `sqmkit test --json`): %w", jsonErr(err))
	}
	if head.SchemaVersion == nil || !strings.HasPrefix(head.Tool, "sqmkit") {
		return nil, errors.New(`not a sqmkit result: no "schema_version" or no "tool": "sqmkit ..." field (want the JSON written by ` + "`sqmkit test --json`)")
	}
	if v := *head.SchemaVersion; v != bbresult.SchemaVersion {
		return nil, fmt.Errorf("schema_version %d written by %q, this sqmkit reads version %d: use the sqmkit that wrote it or re-run the test", v, head.Tool, bbresult.SchemaVersion)
	}
	var r bbresult.Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("sqmkit result: %w", jsonErr(err))
	}
	return &r, nil
}

// jsonErr names the field of a type mismatch, which encoding/json puts in
// the error text only as a Go type path.
func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("field %q: got JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	return err
}
