package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// TargetVersion is the codex-cli version whose schema the api package
// follows; its bundles are in the folder v<TargetVersion>.
const TargetVersion = "0.171.0"

//go:embed v0.171.0/stable/codex_app_server_protocol.schemas.json v0.171.0/experimental/codex_app_server_protocol.schemas.json
var bundles embed.FS

// bundleName is the file the generator writes with every definition.
const bundleName = "codex_app_server_protocol.schemas.json"

// Bundles returns the stable and the experimental bundle of TargetVersion.
func Bundles() (stable, experimental []byte, err error) {
	dir := "v" + TargetVersion
	if stable, err = bundles.ReadFile(path.Join(dir, "stable", bundleName)); err != nil {
		return nil, nil, err
	}
	if experimental, err = bundles.ReadFile(path.Join(dir, "experimental", bundleName)); err != nil {
		return nil, nil, err
	}
	return stable, experimental, nil
}

// Target loads the schema of TargetVersion.
func Target() (*Protocol, error) {
	stable, experimental, err := Bundles()
	if err != nil {
		return nil, err
	}
	return Load(TargetVersion, stable, experimental)
}

// Kind is one of the four message families of the protocol.
type Kind int

// The message families, in the order the docs list them.
const (
	ClientRequest Kind = iota
	ClientNotification
	ServerNotification
	ServerRequest
)

var kindNames = [...]string{"client request", "client notification", "server notification", "server request"}

// String names the family in prose.
func (k Kind) String() string { return kindNames[k] }

// definition is the schema definition that lists the family's methods.
func (k Kind) definition() string {
	return [...]string{"ClientRequest", "ClientNotification", "ServerNotification", "ServerRequest"}[k]
}

// Kinds lists the families.
var Kinds = []Kind{ClientRequest, ClientNotification, ServerNotification, ServerRequest}

// Method is one method of the protocol.
type Method struct {
	// Name is the wire name, e.g. "thread/start".
	Name string
	// Kind is the family.
	Kind Kind
	// Experimental is true when only the experimental bundle has it: a
	// client request of that sort needs capabilities.experimentalApi.
	Experimental bool
	// NullParams is true when params may be absent or null.
	NullParams bool
	// Params names the definition of the params ("" when there are none).
	Params string
	// Result names the definition of the result of a request ("" for a
	// notification).
	Result string
}

// Protocol is one version's schema: its methods and definitions.
type Protocol struct {
	// Version is the codex-cli version the schema is of.
	Version string
	// Methods lists every method, by kind then name.
	Methods []Method

	defs       map[string]*Node // the experimental bundle's, by name
	stableDefs map[string]*Node
}

// Node is one JSON Schema node of the bundles, as far as the generator of
// the reference uses the vocabulary.
type Node struct {
	Ref                  string           `json:"$ref"`
	Type                 Types            `json:"type"`
	Properties           map[string]*Node `json:"properties"`
	Required             []string         `json:"required"`
	Items                *Node            `json:"items"`
	AdditionalProperties json.RawMessage  `json:"additionalProperties"`
	Enum                 []any            `json:"enum"`
	Const                any              `json:"const"`
	AnyOf                []*Node          `json:"anyOf"`
	OneOf                []*Node          `json:"oneOf"`
	AllOf                []*Node          `json:"allOf"`
	Title                string           `json:"title"`
	Description          string           `json:"description"`
	Format               string           `json:"format"`
}

// UnmarshalJSON also accepts the boolean schemas: true (anything goes) is
// an empty node, false a node no value matches.
func (n *Node) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*n = Node{}
		return nil
	case "false":
		*n = Node{Type: Types{"never"}}
		return nil
	}
	type plain Node
	return json.Unmarshal(b, (*plain)(n))
}

// Types is the "type" keyword: one name or a list of names.
type Types []string

// UnmarshalJSON accepts a string or an array of strings.
func (t *Types) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Types{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	*t = l
	return nil
}

// Has reports whether name is one of the types.
func (t Types) Has(name string) bool {
	for _, n := range t {
		if n == name {
			return true
		}
	}
	return false
}

// responseOf names the result definitions the naming rule (FooParams →
// FooResponse) does not find: the reference's method table says them and
// its schema does not. Load fails on a method whose result it cannot name,
// so a new version's exceptions are noticed.
var responseOf = map[string]string{
	"account/gatewayOAuth/cancel":              "GatewayOAuthCancelResponse",
	"account/logout":                           "LogoutAccountResponse",
	"account/securitySetup/read":               "GetAccountSecuritySetupResponse",
	"account/workspaceMessages/read":           "GetWorkspaceMessagesResponse",
	"accountSession/list":                      "AccountSessionsResponse",
	"config/batchWrite":                        "ConfigWriteResponse",
	"config/mcpServer/reload":                  "McpServerRefreshResponse",
	"config/value/write":                       "ConfigWriteResponse",
	"configRequirements/read":                  "ConfigRequirementsReadResponse",
	"externalAgentConfig/import/readHistories": "ExternalAgentConfigImportHistoriesReadResponse",
	"memory/reset":                             "MemoryResetResponse",
	"modelProvider/default/set":                "ConfigWriteResponse",
	"remoteControl/status/read":                "RemoteControlStatusReadResponse",
	"rollout/compress":                         "RolloutCompressResponse",
	"windowsSandbox/readiness":                 "WindowsSandboxReadinessResponse",
}

// Load reads a version's stable and experimental bundles
// (codex_app_server_protocol.schemas.json of each).
func Load(version string, stable, experimental []byte) (*Protocol, error) {
	p := &Protocol{Version: version}
	var err error
	if p.stableDefs, err = definitions(stable); err != nil {
		return nil, fmt.Errorf("stable bundle: %w", err)
	}
	if p.defs, err = definitions(experimental); err != nil {
		return nil, fmt.Errorf("experimental bundle: %w", err)
	}
	for _, k := range Kinds {
		all, err := p.methodsOf(p.defs, k)
		if err != nil {
			return nil, err
		}
		stableOnes, err := p.methodsOf(p.stableDefs, k)
		if err != nil {
			return nil, err
		}
		inStable := map[string]bool{}
		for _, m := range stableOnes {
			inStable[m.Name] = true
		}
		for _, m := range all {
			m.Experimental = !inStable[m.Name]
			p.Methods = append(p.Methods, m)
		}
	}
	sort.SliceStable(p.Methods, func(i, j int) bool {
		a, b := p.Methods[i], p.Methods[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return p, nil
}

// definitions flattens a bundle's definitions: the top-level ones by name
// and those of the nested "v2" group by name too (a name in both holds the
// same definition but for its annotations).
func definitions(bundle []byte) (map[string]*Node, error) {
	var b struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(bundle, &b); err != nil {
		return nil, err
	}
	defs := map[string]*Node{}
	raws := map[string]json.RawMessage{}
	add := func(name string, raw json.RawMessage) error {
		if prev, dup := raws[name]; dup {
			if !sameDefinition(prev, raw) {
				return fmt.Errorf("two different definitions %s", name)
			}
			return nil
		}
		raws[name] = raw
		var n Node
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("definition %s: %w", name, err)
		}
		defs[name] = &n
		return nil
	}
	for name, raw := range b.Definitions {
		if name != "v2" {
			if err := add(name, raw); err != nil {
				return nil, err
			}
			continue
		}
		var group map[string]json.RawMessage
		if err := json.Unmarshal(raw, &group); err != nil {
			return nil, err
		}
		for n, r := range group {
			if err := add(n, r); err != nil {
				return nil, err
			}
		}
	}
	return defs, nil
}

// sameDefinition reports whether two definitions agree but for their
// annotations ($schema, title, description).
func sameDefinition(a, b json.RawMessage) bool {
	strip := func(raw json.RawMessage) []byte {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return raw
		}
		delete(m, "$schema")
		delete(m, "title")
		delete(m, "description")
		out, _ := json.Marshal(m)
		return out
	}
	return bytes.Equal(strip(a), strip(b))
}

// methodsOf lists the methods of family k in defs.
func (p *Protocol) methodsOf(defs map[string]*Node, k Kind) ([]Method, error) {
	root := defs[k.definition()]
	if root == nil {
		return nil, fmt.Errorf("no definition %s", k.definition())
	}
	var out []Method
	for _, v := range root.OneOf {
		mn := v.Properties["method"]
		if mn == nil || len(mn.Enum) != 1 {
			return nil, fmt.Errorf("%s: a variant without a single method name", k.definition())
		}
		name, _ := mn.Enum[0].(string)
		m := Method{Name: name, Kind: k}
		params := v.Properties["params"]
		required := contains(v.Required, "params")
		switch {
		case params == nil:
			m.NullParams = true
		case params.Ref != "":
			m.Params = refName(params.Ref)
			m.NullParams = !required
		case params.Type.Has("null") && len(params.Type) == 1:
			m.NullParams = true
		default:
			for _, alt := range params.AnyOf {
				if alt.Ref != "" {
					m.Params = refName(alt.Ref)
				}
				if alt.Type.Has("null") {
					m.NullParams = true
				}
			}
			if m.Params == "" {
				return nil, fmt.Errorf("%s %s: params of an unknown shape", k, name)
			}
		}
		if k == ClientRequest || k == ServerRequest {
			r, err := resultOf(defs, m)
			if err != nil {
				return nil, err
			}
			m.Result = r
		}
		out = append(out, m)
	}
	return out, nil
}

// resultOf names the result definition of request m.
func resultOf(defs map[string]*Node, m Method) (string, error) {
	if r, ok := responseOf[m.Name]; ok {
		if defs[r] == nil {
			return "", fmt.Errorf("%s: no definition %s", m.Name, r)
		}
		return r, nil
	}
	if base, ok := strings.CutSuffix(m.Params, "Params"); ok && defs[base+"Response"] != nil {
		return base + "Response", nil
	}
	return "", fmt.Errorf("%s %s: cannot name its result definition; add it to responseOf", m.Kind, m.Name)
}

// refName is the definition name a $ref points at.
func refName(ref string) string { return ref[strings.LastIndexByte(ref, '/')+1:] }

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// Method returns the method of kind k named name.
func (p *Protocol) Method(k Kind, name string) (Method, bool) {
	for _, m := range p.Methods {
		if m.Kind == k && m.Name == name {
			return m, true
		}
	}
	return Method{}, false
}

// Of lists the methods of kind k, by name.
func (p *Protocol) Of(k Kind) []Method {
	var out []Method
	for _, m := range p.Methods {
		if m.Kind == k {
			out = append(out, m)
		}
	}
	return out
}

// Def returns the definition named name, nil if there is none.
func (p *Protocol) Def(name string) *Node { return p.defs[name] }

// Resolve follows n's $ref (and a lone allOf wrapper, which the reference
// uses to attach a description to a reference) to the node it names.
func (p *Protocol) Resolve(n *Node) *Node {
	for n != nil {
		switch {
		case n.Ref != "":
			n = p.defs[refName(n.Ref)]
		case len(n.AllOf) == 1 && len(n.Properties) == 0 && len(n.Type) == 0:
			n = n.AllOf[0]
		default:
			return n
		}
	}
	return nil
}

// ExperimentalField reports whether property prop of definition def exists
// only in the experimental bundle.
func (p *Protocol) ExperimentalField(def, prop string) bool {
	s := p.stableDefs[def]
	if s == nil {
		return p.defs[def] != nil
	}
	_, ok := s.Properties[prop]
	return !ok
}
