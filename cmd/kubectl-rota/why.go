package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/whyreport"
)

func newWhyCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "why POD",
		Short: "Why the pod waits (or where it went): the verdict, each tier's numbers, last decisions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			client, _, ns, err := o.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			pod, err := client.CoreV1().Pods(ns).Get(ctx, args[0], metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get pod %s/%s: %w", ns, args[0], err)
			}
			evs, err := whyreport.PodEvents(ctx, client.CoreV1().Events(ns), pod)
			if err != nil {
				return err
			}
			r := whyreport.Explain(pod, evs)
			r.DescribeReclaim(time.Now(), func(ns, name string) bool {
				p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil)
			})
			switch o.output {
			case "json":
				return writeJSON(o.streams.Out, r)
			case "yaml":
				return writeYAML(o.streams.Out, r)
			}
			return whyreport.WriteText(o.streams.Out, r, whyreport.TextOptions{Width: o.width, Color: o.color()})
		},
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("write yaml: %w", err)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write yaml: %w", err)
	}
	return nil
}
