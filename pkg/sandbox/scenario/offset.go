package scenario

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Offset is a time after the scenario's start: a Go duration ("90m",
// "2h30m") optionally preceded by whole days ("1d", "4d10h").
type Offset time.Duration

// ParseOffset reads an offset.
func ParseOffset(s string) (Offset, error) {
	s = strings.TrimSpace(s)
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: days must be a whole number", s)
		}
		days, s = n, s[i+1:]
	}
	var d time.Duration
	if s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration such as 90s, 2h30m or 1d8h", s)
		}
	}
	total := time.Duration(days)*24*time.Hour + d
	if total < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return Offset(total), nil
}

// Duration is the offset as a time.Duration.
func (o Offset) Duration() time.Duration { return time.Duration(o) }

// String prints whole days as "Nd".
func (o Offset) String() string {
	d := time.Duration(o)
	days := d / (24 * time.Hour)
	rest := d - days*24*time.Hour
	switch {
	case days == 0:
		return rest.String()
	case rest == 0:
		return fmt.Sprintf("%dd", days)
	default:
		return fmt.Sprintf("%dd%s", days, rest)
	}
}

// UnmarshalJSON accepts a string offset.
func (o *Offset) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("want a string such as \"90m\" or \"1d8h\"")
	}
	v, err := ParseOffset(s)
	if err != nil {
		return err
	}
	*o = v
	return nil
}

// MarshalJSON writes the string form.
func (o Offset) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }
