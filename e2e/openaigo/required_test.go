package openaigo_test

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/packages/respjson"
)

// missingRequired lists the members the SDK's types mark api:"required"
// that a decoded value lacks (omitted; null counts as present: the API
// spells "none" as null for many), as JSON paths, in every member the
// body holds. The SDK
// decodes such a body without an error, leaving the zero value, so only
// this check sees what a user's code would read as absent.
func missingRequired(v any) []string {
	var out []string
	walkRequired(reflect.ValueOf(v), "", &out)
	return out
}

func walkRequired(v reflect.Value, path string, out *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkRequired(v.Elem(), path, out)
		}
		return
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walkRequired(v.Index(i), path+"["+strconv.Itoa(i)+"]", out)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() || meta.Kind() != reflect.Struct {
		return
	}
	ty := v.Type()
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		if !f.IsExported() || f.Name == "JSON" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := path + "." + name
		m := meta.FieldByName(f.Name)
		if !m.IsValid() {
			continue
		}
		field, ok := m.Interface().(respjson.Field)
		if !ok {
			continue
		}
		switch field.Raw() {
		case respjson.Omitted:
			if strings.Contains(f.Tag.Get("api"), "required") {
				*out = append(*out, p)
			}
		case respjson.Null:
		default: // only what the body holds is walked
			walkRequired(v.Field(i), p, out)
		}
	}
}
