// Command oracle answers DRA questions with the upstream Kubernetes code itself,
// so that drax's Python allocator and CEL engine can be checked against it.
//
// It is long-running and speaks JSON lines: one request per stdin line, one
// answer per stdout line, in order. Every malformed request gets an
// {"error": ...} answer; the process only exits at end of input.
//
// Ops (see tests/upstream/oracle.py for the client):
//
//	{"op":"allocate","objects":[...],"claims":[...],"node":"N","features":{...},"timing":bool}
//	{"op":"allocate",...,"nodes":["N1","N2"],"repeat":k}   one allocator, Allocate per node
//	{"op":"cel","expression":"...","device":{...},"features":{...}}
//	{"op":"version"}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type request struct {
	Op         string            `json:"op"`
	Objects    []json.RawMessage `json:"objects"`
	Claims     []json.RawMessage `json:"claims"`
	Node       string            `json:"node"`
	Nodes      []string          `json:"nodes"`
	Repeat     int               `json:"repeat"`
	Features   map[string]bool   `json:"features"`
	Timing     bool              `json:"timing"`
	Expression string            `json:"expression"`
	Device     *celDevice        `json:"device"`
}

type celDevice struct {
	Driver                   string                                                    `json:"driver"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]json.RawMessage             `json:"capacity"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
}

type deviceResult struct {
	Request          string            `json:"request"`
	Driver           string            `json:"driver"`
	Pool             string            `json:"pool"`
	Device           string            `json:"device"`
	AdminAccess      bool              `json:"adminAccess"`
	ConsumedCapacity map[string]string `json:"consumedCapacity"`
	ShareID          *string           `json:"shareID"`
}

type nodeAnswer struct {
	Node     string  `json:"node,omitempty"`
	Feasible bool    `json:"feasible"`
	Error    *string `json:"error"`
	// FailedOnNode marks an error wrapping ErrFailedAllocationOnNode, which the
	// scheduler reports as "unschedulable on this node" instead of aborting.
	FailedOnNode bool             `json:"failedOnNode,omitempty"`
	Results      [][]deviceResult `json:"results"`
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		line, readErr := in.ReadBytes('\n')
		if text := strings.TrimSpace(string(line)); text != "" {
			if err := enc.Encode(answer([]byte(text))); err != nil {
				_ = enc.Encode(map[string]string{"error": "encode answer: " + err.Error()})
			}
		}
		// Flush only when no further request is already waiting: pipelined
		// batches then cost one write, a lone request is answered at once.
		if in.Buffered() == 0 {
			_ = out.Flush()
		}
		if readErr != nil {
			break
		}
	}
	_ = out.Flush()
}

func answer(line []byte) (reply any) {
	defer func() {
		if r := recover(); r != nil {
			reply = map[string]string{"error": fmt.Sprintf("panic: %v", r)}
		}
	}()
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return map[string]string{"error": "malformed request: " + err.Error()}
	}
	switch req.Op {
	case "allocate":
		return allocate(&req)
	case "cel":
		return evalCEL(&req)
	case "version":
		return version()
	default:
		return map[string]string{"error": fmt.Sprintf("unknown op %q", req.Op)}
	}
}

// gate names of the scheduler's feature gates, as the allocator's Features fields.
func allocatorFeatures(gates map[string]bool) (structured.Features, []string) {
	var f structured.Features
	var ignored []string
	for name, on := range gates {
		switch name {
		case "DRAAdminAccess":
			f.AdminAccess = on
		case "DRADeviceCompatibilityGroups":
			f.CompatibilityGroups = on
		case "DRAConsumableCapacity":
			f.ConsumableCapacity = on
		case "DRADerivedAttributes":
			f.DerivedAttributes = on
		case "DRADeviceTaints":
			f.DeviceTaints = on
		case "DRAFractionalCapacityRange":
			f.FractionalCapacityRange = on
		case "DRAListTypeAttributes":
			f.ListTypeAttributes = on
		case "DRAOptionalNodeOperations":
			f.OptionalNodeOperations = on
		case "DRAPartitionableDevices":
			f.PartitionableDevices = on
		case "DRAPrioritizedList":
			f.PrioritizedList = on
		case "DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus":
			// The scheduler enables binding support only when both gates are on.
		default:
			ignored = append(ignored, name)
		}
	}
	f.DeviceBindingAndStatus = gates["DRADeviceBindingConditions"] && gates["DRAResourceClaimDeviceStatus"]
	sort.Strings(ignored)
	return f, ignored
}

func celFeatures(gates map[string]bool) cel.Features {
	return cel.Features{
		EnableConsumableCapacity: gates["DRAConsumableCapacity"],
		EnableListTypeAttributes: gates["DRAListTypeAttributes"],
	}
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	classes := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		classes = append(classes, c)
	}
	return classes, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

type inventory struct {
	nodes     map[string]*v1.Node
	slices    []*resourceapi.ResourceSlice
	classes   classLister
	allocated []*resourceapi.ResourceClaim
}

func decodeObjects(raw []json.RawMessage) (*inventory, error) {
	inv := &inventory{nodes: map[string]*v1.Node{}, classes: classLister{}}
	for i, obj := range raw {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(obj, &meta); err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
		var err error
		switch meta.Kind {
		case "Node":
			node := &v1.Node{}
			if err = json.Unmarshal(obj, node); err == nil {
				inv.nodes[node.Name] = node
			}
		case "ResourceSlice":
			slice := &resourceapi.ResourceSlice{}
			if err = json.Unmarshal(obj, slice); err == nil {
				inv.slices = append(inv.slices, slice)
			}
		case "DeviceClass":
			class := &resourceapi.DeviceClass{}
			if err = json.Unmarshal(obj, class); err == nil {
				inv.classes[class.Name] = class
			}
		case "ResourceClaim":
			claim := &resourceapi.ResourceClaim{}
			if err = json.Unmarshal(obj, claim); err == nil {
				applyClaimDefaults(claim)
				inv.allocated = append(inv.allocated, claim)
			}
		default:
			err = fmt.Errorf("unsupported kind %q", meta.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
	}
	return inv, nil
}

// applyClaimDefaults does what API defaulting does to a stored claim (the
// allocator sees only stored claims): ExactCount with count 1 unless said
// otherwise, and toleration operator Equal.
func applyClaimDefaults(claim *resourceapi.ResourceClaim) {
	defaultTolerations := func(tolerations []resourceapi.DeviceToleration) {
		for i := range tolerations {
			if tolerations[i].Operator == "" {
				tolerations[i].Operator = resourceapi.DeviceTolerationOpEqual
			}
		}
	}
	for i := range claim.Spec.Devices.Requests {
		r := &claim.Spec.Devices.Requests[i]
		if r.Exactly != nil {
			if r.Exactly.AllocationMode == "" {
				r.Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && r.Exactly.Count == 0 {
				r.Exactly.Count = 1
			}
			defaultTolerations(r.Exactly.Tolerations)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			if sub.AllocationMode == "" {
				sub.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount && sub.Count == 0 {
				sub.Count = 1
			}
			defaultTolerations(sub.Tolerations)
		}
	}
}

// allocatedState is what the in-tree plugin derives from allocated claims:
// admin-access results do not block a device, shared results (with a share
// ID, when consumable capacity is on) add their consumed capacity instead.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if consumable && r.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

func allocate(req *request) any {
	inv, err := decodeObjects(req.Objects)
	if err != nil {
		return map[string]string{"error": "malformed request: " + err.Error()}
	}
	claims := make([]*resourceapi.ResourceClaim, len(req.Claims))
	for i, raw := range req.Claims {
		claims[i] = &resourceapi.ResourceClaim{}
		if err := json.Unmarshal(raw, claims[i]); err != nil {
			return map[string]string{"error": fmt.Sprintf("malformed request: claims[%d]: %v", i, err)}
		}
		applyClaimDefaults(claims[i])
	}
	nodeNames := req.Nodes
	if len(nodeNames) == 0 {
		if req.Node == "" {
			return map[string]string{"error": "malformed request: node (or nodes) is required"}
		}
		nodeNames = []string{req.Node}
	}
	nodes := make([]*v1.Node, len(nodeNames))
	for i, name := range nodeNames {
		if nodes[i] = inv.nodes[name]; nodes[i] == nil {
			return map[string]string{"error": fmt.Sprintf("malformed request: node %q is not among the objects", name)}
		}
	}
	features, ignored := allocatorFeatures(req.Features)
	repeat := max(req.Repeat, 1)

	ctx := context.Background()
	cache := cel.NewCache(100, celFeatures(req.Features))
	var answers []nodeAnswer
	var nanos int64
	for range repeat {
		answers = answers[:0]
		state := allocatedState(inv.allocated, features.ConsumableCapacity)
		start := time.Now()
		alloc, err := structured.NewAllocator(ctx, features, state, inv.classes, inv.slices, cache)
		if err != nil {
			nanos += time.Since(start).Nanoseconds()
			msg := err.Error()
			answers = append(answers, nodeAnswer{Error: &msg})
			break
		}
		for _, node := range nodes {
			results, err := alloc.Allocate(ctx, node, claims)
			answers = append(answers, nodeVerdict(node.Name, results, err))
		}
		nanos += time.Since(start).Nanoseconds()
	}

	reply := map[string]any{}
	if len(req.Nodes) == 0 {
		a := answers[0]
		reply["feasible"] = a.Feasible
		reply["error"] = a.Error
		reply["results"] = a.Results
		if a.FailedOnNode {
			reply["failedOnNode"] = true
		}
	} else {
		reply["perNode"] = answers
	}
	if req.Timing {
		reply["nanos"] = nanos
		reply["repeat"] = repeat
	}
	if len(ignored) > 0 {
		reply["ignoredFeatures"] = ignored
	}
	return reply
}

func nodeVerdict(node string, results []resourceapi.AllocationResult, err error) nodeAnswer {
	a := nodeAnswer{Node: node}
	switch {
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		msg := err.Error()
		a.Error = &msg
		a.FailedOnNode = true
	case err != nil:
		msg := err.Error()
		a.Error = &msg
	case results != nil:
		a.Feasible = true
		a.Results = make([][]deviceResult, len(results))
		for i, r := range results {
			a.Results[i] = convertResults(r.Devices.Results)
		}
	}
	return a
}

func convertResults(in []resourceapi.DeviceRequestAllocationResult) []deviceResult {
	out := make([]deviceResult, 0, len(in))
	for _, r := range in {
		d := deviceResult{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device,
			AdminAccess: r.AdminAccess != nil && *r.AdminAccess}
		if r.ConsumedCapacity != nil {
			d.ConsumedCapacity = map[string]string{}
			for name, q := range r.ConsumedCapacity {
				d.ConsumedCapacity[string(name)] = q.String()
			}
		}
		if r.ShareID != nil {
			s := string(*r.ShareID)
			d.ShareID = &s
		}
		out = append(out, d)
	}
	return out
}

func evalCEL(req *request) any {
	if req.Device == nil {
		return map[string]string{"error": "malformed request: device is required"}
	}
	device := cel.Device{
		Driver:                   req.Device.Driver,
		Attributes:               req.Device.Attributes,
		AllowMultipleAllocations: req.Device.AllowMultipleAllocations,
		Capacity:                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
	}
	for name, raw := range req.Device.Capacity {
		c, err := decodeCapacity(raw)
		if err != nil {
			return map[string]string{"error": fmt.Sprintf("malformed request: capacity %s: %v", name, err)}
		}
		device.Capacity[name] = c
	}
	// The scheduler's options: stored-expressions environment, the DRA cost limit.
	compiled := cel.GetCompiler(celFeatures(req.Features)).CompileCELExpression(req.Expression, cel.Options{})
	if compiled.Error != nil {
		return map[string]any{"compileError": compiled.Error.Error()}
	}
	matches, _, err := compiled.DeviceMatches(context.Background(), device)
	reply := map[string]any{"maxCost": compiled.MaxCost}
	switch {
	case err != nil && strings.Contains(err.Error(), "cost limit exceeded"):
		reply["costError"] = err.Error()
	case err != nil:
		reply["runtimeError"] = err.Error()
	default:
		reply["result"] = matches
	}
	return reply
}

// decodeCapacity takes a DeviceCapacity object or, for brevity, a bare quantity string.
func decodeCapacity(raw json.RawMessage) (resourceapi.DeviceCapacity, error) {
	var c resourceapi.DeviceCapacity
	if strings.HasPrefix(strings.TrimSpace(string(raw)), `"`) {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return c, err
		}
		q, err := resource.ParseQuantity(text)
		if err != nil {
			return c, err
		}
		c.Value = q
		return c, nil
	}
	err := json.Unmarshal(raw, &c)
	return c, err
}

func version() any {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return map[string]string{"error": "no build info"}
	}
	modules := map[string]string{}
	for _, dep := range info.Deps {
		if strings.HasPrefix(dep.Path, "k8s.io/") || dep.Path == "github.com/google/cel-go" {
			modules[dep.Path] = dep.Version
		}
	}
	return map[string]any{"go": info.GoVersion, "modules": modules}
}
