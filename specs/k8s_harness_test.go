package specs

// The Kubernetes side of the specs: a real kube-apiserver and etcd under
// controller-runtime's envtest (built from the Go module proxy by
// .ci/k8s-tools, found through KAAS_K8S_TOOLS), the kaas-operator binary
// pointed at it, and helm for rendering the chart.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kaasv1 "github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
)

// k8sVersion is the kube-apiserver .ci/k8s-tools builds; helm renders for it.
const k8sVersion = "1.37.2"

// k8sTools is the directory holding kube-apiserver, etcd and helm.
func k8sTools() string {
	GinkgoHelper()
	dir := os.Getenv("KAAS_K8S_TOOLS")
	Expect(dir).NotTo(BeEmpty(), "KAAS_K8S_TOOLS is not set: `make specs` sets it to what `bash .ci/k8s-tools` prints")
	for _, bin := range []string{"kube-apiserver", "etcd", "helm"} {
		_, err := os.Stat(filepath.Join(dir, bin))
		Expect(err).NotTo(HaveOccurred(), "KAAS_K8S_TOOLS=%s has no %s", dir, bin)
	}
	return dir
}

// apiServer is a running envtest control plane with kaas's CRD installed.
type apiServer struct {
	env        *envtest.Environment
	cfg        *rest.Config
	client     client.Client
	kubeconfig string // a system:masters user's kubeconfig file
}

// startAPIServer starts etcd and kube-apiserver on 127.0.0.1, installs
// the chart's CRDs, and stops them when the current container ends.
func startAPIServer() *apiServer {
	GinkgoHelper()
	tools := k8sTools()
	env := &envtest.Environment{
		BinaryAssetsDirectory: tools,
		CRDDirectoryPaths:     []string{filepath.Join(moduleRoot(), "deploy", "kaas", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	// On a host without a default route kube-apiserver cannot choose an
	// address to advertise, and the endpoint reconciler refuses loopback.
	env.ControlPlane.GetAPIServer().Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	started := time.Now()
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred(), "envtest: start etcd and kube-apiserver from %s", tools)
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	fmt.Fprintf(GinkgoWriter, "kube-apiserver and etcd up in %v\n", time.Since(started))

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(kaasv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	user, err := env.AddUser(envtest.User{Name: "kaas-operator", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, kc, 0o600)).To(Succeed())
	return &apiServer{env: env, cfg: cfg, client: c, kubeconfig: path}
}

// operatorProcess is one kaas-operator process.
type operatorProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

var (
	operatorBinOnce sync.Once
	operatorBin     string
)

// buildOperator builds cmd/kaas-operator once per spec process (only the
// k8s specs need it).
func buildOperator(ctx context.Context) string {
	GinkgoHelper()
	operatorBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kaas-specs-operator-")
		Expect(err).NotTo(HaveOccurred())
		operatorBin = goBuild(ctx, "./cmd/kaas-operator", filepath.Join(dir, "kaas-operator"))
	})
	Expect(operatorBin).NotTo(BeEmpty(), "an earlier build of kaas-operator failed")
	return operatorBin
}

// startOperator runs kaas-operator against the API server and the
// broker's data directory, polling the reconcile status every 200 ms, with
// extra flags after those. It is stopped with SIGTERM (which must exit 0)
// when the current container ends.
func startOperator(ctx context.Context, api *apiServer, dataDir string, extra ...string) *operatorProcess {
	GinkgoHelper()
	bin := buildOperator(ctx)
	logPath := filepath.Join(GinkgoT().TempDir(), "kaas-operator.log")
	f, err := os.Create(logPath)
	Expect(err).NotTo(HaveOccurred())
	probe := freeAddr()
	cmd := exec.Command(bin,
		"--kubeconfig", api.kubeconfig,
		"--data", dataDir,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", probe,
		"--status-poll-interval", "200ms",
		"--resync-interval", "5s",
	)
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = f, f
	Expect(cmd.Start()).To(Succeed())
	op := &operatorProcess{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); f.Close(); close(op.done) }()
	DeferCleanup(op.stop)
	Eventually(func(g Gomega) {
		resp, err := httpClient.Get("http://" + probe + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(200))
	}).WithTimeout(30*time.Second).Should(Succeed(), "kaas-operator did not become ready; log:\n%s", op.tail())
	return op
}

func (op *operatorProcess) tail() string {
	b, _ := os.ReadFile(op.log)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

func (op *operatorProcess) stop() {
	select {
	case <-op.done:
		return
	default:
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.done:
		Expect(op.cmd.ProcessState.ExitCode()).To(Equal(0), "kaas-operator exit after SIGTERM; log:\n%s", op.tail())
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.done
		Fail("kaas-operator did not exit within 30 s of SIGTERM; log:\n" + op.tail())
	}
}

// kill stops the operator with SIGKILL.
func (op *operatorProcess) kill() {
	_ = op.cmd.Process.Kill()
	<-op.done
}

// helm runs the built helm with args and returns its stdout; it writes
// its caches and config under a temp HOME.
func helm(ctx context.Context, args ...string) []byte {
	GinkgoHelper()
	home := GinkgoT().TempDir()
	cmd := exec.CommandContext(ctx, filepath.Join(k8sTools(), "helm"), args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	Expect(cmd.Run()).To(Succeed(), "helm %s:\n%s%s", strings.Join(args, " "), out.String(), errb.String())
	return out.Bytes()
}

// helmTemplate renders deploy/kaas with args and returns the manifests.
func helmTemplate(ctx context.Context, args ...string) []byte {
	GinkgoHelper()
	chart := filepath.Join(moduleRoot(), "deploy", "kaas")
	return helm(ctx, append([]string{"template", "kaas", chart, "--kube-version", k8sVersion}, args...)...)
}

// helmTemplateRefused renders deploy/kaas with args, expects helm to
// refuse, and returns what it said.
func helmTemplateRefused(ctx context.Context, args ...string) string {
	GinkgoHelper()
	home := GinkgoT().TempDir()
	chart := filepath.Join(moduleRoot(), "deploy", "kaas")
	cmd := exec.CommandContext(ctx, filepath.Join(k8sTools(), "helm"),
		append([]string{"template", "kaas", chart, "--kube-version", k8sVersion}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	Expect(err).To(HaveOccurred(), "helm template %s rendered:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// helmLint runs helm lint --strict on the chart.
func helmLint(ctx context.Context) {
	GinkgoHelper()
	helm(ctx, "lint", "--strict", "--kube-version", k8sVersion, filepath.Join(moduleRoot(), "deploy", "kaas"))
}

// decodeManifests splits a multi-document YAML stream into objects.
func decodeManifests(manifests []byte) []*unstructured.Unstructured {
	GinkgoHelper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred(), "decode rendered manifests")
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// dryRunApply sends every object to the API server as a create with
// dryRun=All and strict field validation: the server's own defaulting,
// validation and admission judge it, and nothing is stored. It returns one
// line per object refused.
func dryRunApply(ctx context.Context, c client.Client, namespace string, objs []*unstructured.Unstructured) []string {
	GinkgoHelper()
	var refused []string
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if u.GetNamespace() == "" {
			m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
			Expect(err).NotTo(HaveOccurred(), "the API server does not know %s", gvk)
			if m.Scope.Name() == "namespace" {
				u.SetNamespace(namespace)
			}
		}
		err := c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s %s: %v", u.GetKind(), u.GetName(), err))
		}
	}
	return refused
}

// desiredTopic is the part of a desired-state file
// (<data>/__cluster/topics/<name>.json) the specs check.
type desiredTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs"`
	Deleted    bool              `json:"deleted"`
	ManagedBy  string            `json:"managedBy"`
}

// readDesired reads a topic's desired-state file; ok is false when absent.
func readDesired(dataDir, name string) (desiredTopic, bool) {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(dataDir, "__cluster", "topics", name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return desiredTopic{}, false
	}
	Expect(err).NotTo(HaveOccurred())
	var d desiredTopic
	Expect(json.Unmarshal(b, &d)).To(Succeed())
	return d, true
}

// isNotFound reports whether err is the API server's 404.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
