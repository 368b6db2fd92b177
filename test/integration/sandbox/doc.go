// Package sandbox tests rota-sandbox: every shipped scenario in
// examples/scenarios plays to its end with every checkpoint's expectations
// met, and the HTML timeline it writes renders.
package sandbox
