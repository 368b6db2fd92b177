package app

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rota-dev/rota/pkg/schedule/targetguard"
)

func newWebhookCertsCommand() *cobra.Command {
	var kubeconfig string
	o := targetguard.CertOptions{}
	cmd := &cobra.Command{
		Use:   "webhook-certs",
		Short: "Issue or renew the target webhook's serving certificate and set the webhook's caBundle",
		Long: `webhook-certs makes sure the Secret --secret holds a serving certificate for the
Service --service (signed by a CA of its own, with a third of its life left) and
that the ValidatingWebhookConfiguration --webhook trusts that CA. It changes
nothing that is already right. The install runs it as a Job at install time and
as a weekly CronJob, under a ServiceAccount of its own: the controller's token
may not touch the webhook that checks its writes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return webhookCerts(ctx, kubeconfig, o, cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration")
	f.StringVar(&o.Namespace, "namespace", envOr("POD_NAMESPACE", "rota-system"), "namespace of the Secret and the Service")
	f.StringVar(&o.SecretName, "secret", "rota-schedule-controller-webhook-tls", "Secret that holds ca.crt, tls.crt and tls.key")
	f.StringVar(&o.ServiceName, "service", "rota-schedule-controller-webhook", "the webhook's Service, named by the certificate")
	f.StringVar(&o.WebhookName, "webhook", "rota-schedule-controller-targets", "ValidatingWebhookConfiguration whose webhooks calling --service get the CA")
	f.StringSliceVar(&o.ExtraHosts, "extra-host", nil, "further DNS names or IP addresses of the certificate (a webhook reached by URL)")
	return cmd
}

func webhookCerts(ctx context.Context, kubeconfig string, o targetguard.CertOptions, cmd *cobra.Command) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	res, err := targetguard.EnsureCerts(ctx, client, o)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "Secret %s/%s: serving certificate valid until %s (new CA: %v, new certificate: %v); caBundle of %s updated: %v\n",
		o.Namespace, o.SecretName, res.NotAfter.UTC().Format("2006-01-02"), res.IssuedCA, res.IssuedCert, o.WebhookName, res.CABundleUpdated)
	return err
}
