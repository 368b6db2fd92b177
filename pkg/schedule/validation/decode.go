package validation

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// DecodeDeploySchedule reads the one DeploySchedule in a YAML file, as a user would
// `kubectl apply` it, but strictly: unknown and duplicate fields are errors, so a
// misspelt field is not silently ignored. It returns every problem it finds.
func DecodeDeploySchedule(data []byte) (*v1alpha1.DeploySchedule, []error) {
	docs, err := documents(data)
	if err != nil {
		return nil, []error{err}
	}
	if len(docs) != 1 {
		return nil, []error{fmt.Errorf("the file holds %d YAML documents, want exactly one DeploySchedule", len(docs))}
	}
	jsonData, err := yaml.YAMLToJSONStrict(docs[0])
	if err != nil {
		return nil, []error{fmt.Errorf("reading YAML: %w", err)}
	}
	var ds v1alpha1.DeploySchedule
	strictErrs, err := sigsjson.UnmarshalStrict(jsonData, &ds, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, []error{fmt.Errorf("decoding DeploySchedule: %w", err)}
	}
	errs := strictErrs
	want := v1alpha1.SchemeGroupVersion.String()
	if ds.APIVersion != want {
		errs = append(errs, fmt.Errorf("apiVersion: Unsupported value: %q: supported values: %q", ds.APIVersion, want))
	}
	if ds.Kind != "DeploySchedule" {
		errs = append(errs, fmt.Errorf("kind: Unsupported value: %q: supported values: %q", ds.Kind, "DeploySchedule"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &ds, nil
}

// documents splits a YAML stream, leaving out documents that hold nothing.
func documents(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML: %w", err)
		}
		jsonData, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("reading YAML: %w", err)
		}
		if s := string(bytes.TrimSpace(jsonData)); s != "null" && s != "" {
			docs = append(docs, doc)
		}
	}
}
