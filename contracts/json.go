package contracts

import (
	"errors"
)

// DecodeJSON decodes one JSON value the way contracts see values: numbers
// as json.Number so no precision is lost before the schema judges them, and
// duplicate keys, invalid UTF-8 and nesting deeper than 2×DefaultMaxDepth
// rejected. For inputs and config documents; outputs go through Extract.
func DecodeJSON(b []byte) (any, error) {
	v, n, viol := decodeValue(b, 0, 2*DefaultMaxDepth)
	if viol != nil {
		return nil, errors.New(viol.Message)
	}
	for _, c := range b[n:] {
		if !isWSByte(c) {
			return nil, errors.New("unexpected data after the JSON value")
		}
	}
	return v, nil
}
