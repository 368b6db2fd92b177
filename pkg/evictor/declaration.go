package evictor

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Bounds of a checkpoint declaration.
const (
	MinGrace = time.Second
	MaxGrace = time.Hour
	// maxPath bounds the endpoint's path, so that a declaration stays a
	// one-line annotation.
	maxPath = 256
)

// Declaration is how a workload checkpoints before a reclaim evicts it: the
// parsed rota.dev/checkpoint annotation, "grace=<duration>[,http=<port><path>]".
type Declaration struct {
	// Grace is how long Rota waits for the acknowledgement before it
	// evicts anyway (MinGrace to MaxGrace).
	Grace time.Duration
	// HTTP, when set, is the endpoint in the pod Rota POSTs to; a 2xx
	// answer acknowledges the checkpoint.
	HTTP *Endpoint
}

// Endpoint is a port and path of the pod's IP.
type Endpoint struct {
	Port int32
	// Path starts with "/".
	Path string
}

// String is the endpoint as the annotation spells it: "8080/checkpoint".
func (e Endpoint) String() string { return strconv.Itoa(int(e.Port)) + e.Path }

// String is the declaration in the annotation's canonical form; it parses
// back to the same declaration.
func (d Declaration) String() string {
	s := "grace=" + d.Grace.String()
	if d.HTTP != nil {
		s += ",http=" + d.HTTP.String()
	}
	return s
}

// DeclarationError is a declaration that does not parse: the field it is
// about ("" for the annotation as a whole) and why.
type DeclarationError struct {
	Field  string
	Reason string
}

func (e *DeclarationError) Error() string {
	if e.Field == "" {
		return "annotation " + gpuv1.CheckpointAnnotation + ": " + e.Reason
	}
	return "annotation " + gpuv1.CheckpointAnnotation + ": " + e.Field + ": " + e.Reason
}

func invalid(field, format string, args ...any) error {
	return &DeclarationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ParseDeclaration parses the rota.dev/checkpoint annotation's value:
// comma-separated key=value fields, grace (required, a Go duration from 1s
// to 1h) and http (optional, a port from 1 to 65535 followed by a path
// starting with "/"), each at most once. Spaces around fields are allowed.
// Errors are *DeclarationError.
func ParseDeclaration(annotation string) (Declaration, error) {
	var d Declaration
	if strings.TrimSpace(annotation) == "" {
		return d, invalid("", `empty; want "grace=<duration>[,http=<port><path>]"`)
	}
	seen := map[string]bool{}
	for field := range strings.SplitSeq(annotation, ",") {
		field = strings.TrimSpace(field)
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return Declaration{}, invalid("", "%q is not key=value (want grace=<duration>[,http=<port><path>])", field)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if seen[key] {
			return Declaration{}, invalid(key, "given twice")
		}
		seen[key] = true
		switch key {
		case "grace":
			g, err := parseGrace(value)
			if err != nil {
				return Declaration{}, err
			}
			d.Grace = g
		case "http":
			e, err := parseEndpoint(value)
			if err != nil {
				return Declaration{}, err
			}
			d.HTTP = &e
		default:
			return Declaration{}, invalid(key, "unknown field (want grace or http)")
		}
	}
	if !seen["grace"] {
		return Declaration{}, invalid("grace", "required")
	}
	return d, nil
}

func parseGrace(value string) (time.Duration, error) {
	g, err := time.ParseDuration(value)
	switch {
	case err != nil:
		return 0, invalid("grace", "%q is not a duration (e.g. 90s, 5m)", value)
	case g < MinGrace:
		return 0, invalid("grace", "%s is less than %s", g, MinGrace)
	case g > MaxGrace:
		return 0, invalid("grace", "%s is more than %s", g, MaxGrace)
	}
	return g, nil
}

func parseEndpoint(value string) (Endpoint, error) {
	digits := strings.IndexFunc(value, func(r rune) bool { return r < '0' || r > '9' })
	if digits < 0 {
		digits = len(value)
	}
	portText, path := value[:digits], value[digits:]
	if portText == "" {
		return Endpoint{}, invalid("http", "%q does not start with a port (want <port><path>, e.g. 8080/checkpoint)", value)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 || (len(portText) > 1 && portText[0] == '0') {
		return Endpoint{}, invalid("http", "port %s is not a number from 1 to 65535", portText)
	}
	if !strings.HasPrefix(path, "/") {
		return Endpoint{}, invalid("http", "path %q does not start with /", path)
	}
	if len(path) > maxPath {
		return Endpoint{}, invalid("http", "path is longer than %d characters", maxPath)
	}
	if i := strings.IndexFunc(path, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII }); i >= 0 {
		return Endpoint{}, invalid("http", "path %q has a space, control or non-ASCII character", path)
	}
	if u, err := url.ParseRequestURI(path); err != nil || u.Path == "" {
		return Endpoint{}, invalid("http", "path %q is not a URL path", path)
	}
	return Endpoint{Port: int32(port), Path: path}, nil
}
