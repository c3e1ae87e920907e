package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/buildinfo"
)

// OpenAPI returns the OpenAPI 3.0 document of the /v1 API, built from the route table and the
// wire types themselves (by reflection), so it cannot drift from what the server does.
func (s *Server) OpenAPI() map[string]any {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, rt := range s.routes() {
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": operationID(rt),
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": map[string]any{"type": "string"}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if t := typeOf(rt.request); t != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": g.schema(t)}}}
		}
		responses := map[string]any{}
		ok := map[string]any{"description": http.StatusText(rt.status)}
		if t := typeOf(rt.response); t != nil {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": g.schema(t)}}
		}
		responses[strconv.Itoa(rt.status)] = ok
		errs := append([]int{}, rt.errors...)
		if rt.perm != permNone {
			errs = append(errs, 401, 403, 429)
			op["security"] = []any{map[string]any{"bearer": []any{}}}
		} else {
			errs = append(errs, 429) // the client address's rate (abuse.go)
		}
		errs = append(errs, 500)
		for _, code := range errs {
			responses[strconv.Itoa(code)] = map[string]any{"description": http.StatusText(code),
				"content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(api.ErrorBody{}))}}}
		}
		op["responses"] = responses
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "kobe API", "version": buildinfo.Get().Version,
			"description": "Lease warm Kubernetes clusters from pools. Compatible with the upstream kobe API. Errors are {error, detail, reason}; reason codes are stable."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

func operationID(rt route) string {
	parts := []string{strings.ToLower(rt.method)}
	for _, seg := range strings.Split(strings.Trim(rt.path, "/"), "/")[1:] {
		if m := pathParam.FindStringSubmatch(seg); m != nil {
			parts = append(parts, "by_"+m[1])
		} else {
			parts = append(parts, seg)
		}
	}
	return strings.Join(parts, "_")
}

// schemaGen turns Go types into OpenAPI schemas, structs as named components.
type schemaGen struct {
	defs map[string]any
}

var timeType = reflect.TypeOf(time.Time{})

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		return g.schema(t.Elem())
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == reflect.TypeOf(json.RawMessage{}):
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := t.Name()
		if _, done := g.defs[name]; !done {
			g.defs[name] = map[string]any{} // placeholder: recursion
			props, required := map[string]any{}, []string{}
			for _, f := range jsonFields(t) {
				props[f.name] = g.schema(f.typ)
				if !f.omitempty {
					required = append(required, f.name)
				}
			}
			def := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
			if len(required) > 0 {
				def["required"] = required
			}
			g.defs[name] = def
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

type jsonField struct {
	name      string
	typ       reflect.Type
	omitempty bool
}

// jsonFields lists a struct's fields as encoding/json sees them.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type, omitempty: strings.Contains(opts, "omitempty")})
	}
	return out
}
