// Command kubecheck validates rendered Kubernetes manifests against the official API types: each
// YAML document is decoded strictly into the Go type that k8s.io/api (or, for the Prometheus
// Operator's PrometheusRule and ServiceMonitor, its own API module) declares for its apiVersion
// and kind. A field the type does not have, a field given twice, a value of the wrong type (a
// string where an integer goes, a malformed quantity), or a kind that does not exist fails the
// check, as `kubectl apply --validate=strict` would; so does an invalid object or label name.
//
// It stands in for a JSON-schema validator (kubeconform): the schemas those read are published
// outside the package registries, and the Go types are what the API server decodes with anyway.
// What it cannot see: a required field left out, or a value the server's own validation refuses
// (those need a cluster).
//
//	go run . FILE...   (scripts/helm.sh check builds it once and runs it on both renders)
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck FILE...")
		os.Exit(2)
	}
	types := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(types); err != nil {
			fmt.Fprintf(os.Stderr, "kubecheck: registering the API types: %v\n", err)
			os.Exit(2)
		}
	}
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, types, types,
		json.SerializerOptions{Yaml: true, Strict: true})
	failed := false
	for _, path := range os.Args[1:] {
		count, err := checkFile(strict, path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubecheck: %s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Fprintf(os.Stderr, "kubecheck: %s: %d objects decode strictly into their API types\n", path, count)
	}
	if failed {
		os.Exit(1)
	}
}

func checkFile(strict runtime.Decoder, path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	count := 0
	var problems []string
	for doc := 1; ; doc++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return count, fmt.Errorf("document %d: %v", doc, err)
		}
		if empty(data) {
			continue
		}
		obj, gvk, err := strict.Decode(data, nil, nil)
		name := "?"
		if gvk != nil {
			name = gvk.Kind
		}
		if obj != nil {
			if m, merr := meta.Accessor(obj); merr == nil {
				name += " " + m.GetName()
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("document %d (%s): %v", doc, name, err))
			continue
		}
		if bad := names(obj); bad != "" {
			problems = append(problems, fmt.Sprintf("document %d (%s): %s", doc, name, bad))
			continue
		}
		count++
	}
	if len(problems) > 0 {
		return count, errors.New(strings.Join(problems, "\n  "))
	}
	if count == 0 {
		return 0, errors.New("no objects")
	}
	return count, nil
}

// empty: a document of nothing but comments and blank lines (helm writes one per skipped file).
func empty(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}

// names checks what every object's metadata must satisfy: a DNS subdomain name and valid labels.
func names(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "no object metadata: " + err.Error()
	}
	if errs := validation.IsDNS1123Subdomain(m.GetName()); len(errs) > 0 {
		return fmt.Sprintf("metadata.name %q: %s", m.GetName(), strings.Join(errs, "; "))
	}
	for k, v := range m.GetLabels() {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return fmt.Sprintf("label %s=%q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	return ""
}
