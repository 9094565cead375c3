// Package perf runs upstream's scheduler_perf test cases (k8s.io/kubernetes
// test/integration/scheduler_perf, read from the module cache) once per call,
// optionally with drax serving the scheduler's extender calls.
//
// `python -m loadtest.scheduler_perf` drives it: it writes a run file (JSON,
// path in $DRAX_PERF_RUN) naming the upstream directory, the test-case file,
// the allocator and topic upstream's own benchmark of that directory uses, the
// measured namespace and, for drax, the command to start. Upstream's prepare
// hook starts drax against the workload's in-process API server, with the
// ServiceAccount and RBAC of manifests/ and a token of that account, before
// any workload op runs; a cleanup stops it. The same hook watches the measured
// namespace so the run reports how many pods were created and bound, and reads
// the scheduler's own latency histograms before upstream resets them.
package perf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/dynamic-resource-allocation/structured"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
)

// run is the run file python -m loadtest.scheduler_perf writes.
type run struct {
	ConfigDir    string `json:"config_dir"`  // upstream directory: templates resolve from here
	ConfigFile   string `json:"config_file"` // upstream's performance-config.yaml or a generated copy
	Allocator    string `json:"allocator"`   // structured.EnableAllocators, as upstream's benchmark
	Topic        string `json:"topic"`       // threshold topic, as upstream's benchmark
	Namespace    string `json:"namespace"`   // where the measured pods are created
	Out          string `json:"out"`         // where this file writes its counts and histograms
	PodsTimeoutS int    `json:"pods_timeout_seconds"`
	Drax         *drax  `json:"drax"`
}

type drax struct {
	Argv        []string          `json:"argv"` // "{kubeconfig}" is replaced by the written kubeconfig
	Env         map[string]string `json:"env"`
	ReadyURL    string            `json:"ready_url"`
	Log         string            `json:"log"`
	PidFile     string            `json:"pid_file"` // drax's pid, for a profiler to attach
	Kubeconfig  string            `json:"kubeconfig"`
	Manifests   []string          `json:"manifests"` // ServiceAccount and RBAC objects are applied
	SANamespace string            `json:"service_account_namespace"`
	SAName      string            `json:"service_account_name"`
}

// histogram is one scheduler histogram summed over its label sets.
type histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"cumulative_counts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

type result struct {
	Created   int      `json:"created"`
	Scheduled int      `json:"scheduled"`
	Failed    int      `json:"failed"`
	Pending   []string `json:"pending"` // "name: PodScheduled message", at most 10
	// When the first and the last measured pod were seen bound (Unix ns, 0: none):
	// the window the process CPU per pod is taken over.
	FirstBound int64                `json:"first_bound_unix_nano"`
	LastBound  int64                `json:"last_bound_unix_nano"`
	Metrics    map[string]histogram `json:"metrics"`
	DraxError  string               `json:"drax_error,omitempty"`
}

var histograms = []string{
	"scheduler_scheduling_algorithm_duration_seconds",
	"scheduler_pod_scheduling_sli_duration_seconds",
}

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func BenchmarkPerfScheduling(b *testing.B) {
	cfg := loadRun(b)
	structured.EnableAllocators(cfg.Allocator)
	defer structured.EnableAllocators()
	// Upstream's template paths are relative to its test directory.
	if err := os.Chdir(cfg.ConfigDir); err != nil {
		b.Fatal(err)
	}
	options := []perf.SchedulerPerfOption{perf.WithPrepareFn(prepare(cfg))}
	if cfg.PodsTimeoutS > 0 {
		options = append(options, perf.WithPodsSchedulingTimeout(time.Duration(cfg.PodsTimeoutS)*time.Second))
	}
	perf.RunBenchmarkPerfScheduling(b, cfg.ConfigFile, cfg.Topic, nil, options...)
}

func loadRun(b *testing.B) *run {
	path := os.Getenv("DRAX_PERF_RUN")
	if path == "" {
		b.Fatal("DRAX_PERF_RUN names no run file (python -m loadtest.scheduler_perf writes it)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var cfg run
	if err := json.Unmarshal(data, &cfg); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	return &cfg
}

// prepare runs once the workload's API server and scheduler are up, before its ops.
func prepare(cfg *run) perf.HookFn {
	return func(tCtx ktesting.TContext) error {
		client, err := kubernetes.NewForConfig(tCtx.RESTConfig())
		if err != nil {
			return err
		}
		res := &result{}
		ctx, cancel := context.WithCancel(context.Background())
		counter := watchPods(ctx, client, cfg.Namespace)
		var stopDrax func()
		if cfg.Drax != nil {
			stopDrax, err = startDrax(tCtx, client, cfg.Drax)
			if err != nil {
				cancel()
				return err
			}
		}
		// Cleanups run last-registered first: this one runs while the API
		// server and scheduler still run, and before upstream resets metrics.
		tCtx.Cleanup(func() {
			counter.settle(ctx, 30*time.Second)
			counter.fill(res)
			res.Metrics = gatherHistograms(tCtx)
			cancel()
			if stopDrax != nil {
				stopDrax()
			}
			writeResult(tCtx, cfg.Out, res)
		})
		return nil
	}
}

// podCounter follows the measured namespace: every pod created, bound or failed.
type podCounter struct {
	mu        sync.Mutex
	created   map[string]bool
	bound     map[string]bool
	failed    map[string]bool
	pending   map[string]*v1.Pod
	lastBound time.Time
	// The first and last time a pod was seen bound (zero: none yet).
	firstBoundAt, lastBoundAt time.Time
}

func watchPods(ctx context.Context, client kubernetes.Interface, namespace string) *podCounter {
	c := &podCounter{created: map[string]bool{}, bound: map[string]bool{}, failed: map[string]bool{},
		pending: map[string]*v1.Pod{}, lastBound: time.Now()}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.see(obj) },
		UpdateFunc: func(_, obj any) { c.see(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				c.mu.Lock()
				delete(c.pending, string(pod.UID))
				c.mu.Unlock()
			}
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return c
}

func (c *podCounter) see(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	uid := string(pod.UID)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created[uid] = true
	if pod.Status.Phase == v1.PodFailed {
		c.failed[uid] = true
	}
	if pod.Spec.NodeName != "" {
		if !c.bound[uid] {
			c.lastBound = time.Now()
			if c.firstBoundAt.IsZero() {
				c.firstBoundAt = c.lastBound
			}
			c.lastBoundAt = c.lastBound
		}
		c.bound[uid] = true
		delete(c.pending, uid)
	} else {
		c.pending[uid] = pod
	}
}

// settle waits for pods still pending (a steady-state workload stops creating
// with some in flight) until all are bound or none was bound for `quiet`.
func (c *podCounter) settle(ctx context.Context, quiet time.Duration) {
	for {
		c.mu.Lock()
		left, idle := len(c.pending), time.Since(c.lastBound)
		c.mu.Unlock()
		if left == 0 || idle > quiet || ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *podCounter) fill(res *result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res.Created, res.Scheduled, res.Failed = len(c.created), len(c.bound), len(c.failed)
	if !c.firstBoundAt.IsZero() {
		res.FirstBound, res.LastBound = c.firstBoundAt.UnixNano(), c.lastBoundAt.UnixNano()
	}
	for _, pod := range c.pending {
		if len(res.Pending) == 10 {
			break
		}
		message := "never attempted"
		for _, cond := range pod.Status.Conditions {
			if cond.Type == v1.PodScheduled {
				message = cond.Reason + ": " + cond.Message
			}
		}
		res.Pending = append(res.Pending, pod.Name+": "+message)
	}
}

func gatherHistograms(tCtx ktesting.TContext) map[string]histogram {
	out := map[string]histogram{}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		tCtx.Logf("gather metrics: %v", err)
		return out
	}
	for _, family := range families {
		for _, name := range histograms {
			if family.GetName() == name {
				out[name] = sumHistograms(family.GetMetric())
			}
		}
	}
	return out
}

func sumHistograms(metrics []*dto.Metric) histogram {
	var h histogram
	for _, m := range metrics {
		hist := m.GetHistogram()
		if hist == nil {
			continue
		}
		if h.Bounds == nil {
			for _, bucket := range hist.GetBucket() {
				h.Bounds = append(h.Bounds, bucket.GetUpperBound())
			}
			h.Counts = make([]uint64, len(h.Bounds))
		}
		for i, bucket := range hist.GetBucket() {
			if i < len(h.Counts) {
				h.Counts[i] += bucket.GetCumulativeCount()
			}
		}
		h.Count += hist.GetSampleCount()
		h.Sum += hist.GetSampleSum()
	}
	return h
}

func writeResult(tCtx ktesting.TContext, path string, res *result) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		tCtx.Errorf("write %s: %v", path, err)
	}
}

// startDrax applies the ServiceAccount and RBAC of manifests/, writes a
// kubeconfig with a token of that account and starts drax with it.
func startDrax(tCtx ktesting.TContext, admin kubernetes.Interface, d *drax) (func(), error) {
	ctx := context.Background()
	for _, path := range d.Manifests {
		if err := applyAccessObjects(ctx, admin, path); err != nil {
			return nil, fmt.Errorf("apply %s: %w", path, err)
		}
	}
	token, err := admin.CoreV1().ServiceAccounts(d.SANamespace).CreateToken(ctx, d.SAName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(24 * 3600))}},
		metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s/%s: %w", d.SANamespace, d.SAName, err)
	}
	if err := writeKubeconfig(tCtx, d.Kubeconfig, token.Status.Token); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(d.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	argv := make([]string, len(d.Argv))
	for i, arg := range d.Argv {
		if arg == "{kubeconfig}" {
			arg = d.Kubeconfig
		}
		argv[i] = arg
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = os.Environ()
	for k, v := range d.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	if d.PidFile != "" {
		if err := os.WriteFile(d.PidFile, []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
			tCtx.Logf("write %s: %v", d.PidFile, err)
		}
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logFile.Close()
	}
	if err := waitReady(d.ReadyURL, exited, 120*time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("drax: %w; log %s:\n%s", err, d.Log, tail(d.Log, 4000))
	}
	return stop, nil
}

func waitReady(url string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before it was ready")
		default:
		}
		if resp, err := client.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s", url, timeout)
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

func writeKubeconfig(tCtx ktesting.TContext, path, token string) error {
	rc := tCtx.RESTConfig()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["perf"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData,
		TLSServerName: rc.ServerName, InsecureSkipTLSVerify: rc.Insecure}
	cfg.AuthInfos["drax"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["perf"] = &clientcmdapi.Context{Cluster: "perf", AuthInfo: "drax"}
	cfg.CurrentContext = "perf"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// applyAccessObjects creates the Namespaces, ServiceAccounts and RBAC objects
// of a manifest file; other kinds (the Deployment, its ConfigMap) are what the
// benchmark itself replaces: its in-process scheduler and the drax process.
func applyAccessObjects(ctx context.Context, c kubernetes.Interface, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	decoder := scheme.Codecs.UniversalDeserializer()
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			if runtime.IsNotRegisteredError(err) {
				continue
			}
			return err
		}
		if err := createAccessObject(ctx, c, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
}

func createAccessObject(ctx context.Context, c kubernetes.Interface, obj runtime.Object) error {
	opts := metav1.CreateOptions{}
	ensureNamespace := func(ns string) {
		_, _ = c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, opts)
	}
	var err error
	switch o := obj.(type) {
	case *v1.ServiceAccount:
		ensureNamespace(o.Namespace)
		_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.ClusterRole:
		_, err = c.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *rbacv1.Role:
		ensureNamespace(o.Namespace)
		_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		ensureNamespace(o.Namespace)
		_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	}
	return err
}
