package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// DecodeJSON decodes one JSON value the way contracts see values: numbers
// as json.Number so no precision is lost before the schema judges them.
// For inputs and config documents; outputs go through Extract.
func DecodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}
