package tool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"

	"github.com/gowebpki/jcs"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compiledSchema is a tool's argument schema, compiled, with its digest.
type compiledSchema struct {
	schema *jsonschema.Schema
	// sha256 is the SHA-256 hex of the RFC 8785 canonical schema: what approvals bind.
	sha256 string
	err    error
}

// compileSchema compiles a tool's Parameters as JSON Schema draft 2020-12. No loader is configured,
// so a schema cannot pull anything from the filesystem or the network.
func compileSchema(t Tool) compiledSchema {
	canon, err := jcs.Transform(t.Parameters)
	if err != nil {
		return compiledSchema{err: fmt.Errorf("tool %s: schema is not JSON: %w", t.Name, err)}
	}
	sum := sha256.Sum256(canon)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil {
		return compiledSchema{err: fmt.Errorf("tool %s: schema: %w", t.Name, err)}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "urn:assay:tool:" + t.Name
	if err := c.AddResource(url, doc); err != nil {
		return compiledSchema{err: fmt.Errorf("tool %s: schema: %w", t.Name, err)}
	}
	s, err := c.Compile(url)
	if err != nil {
		return compiledSchema{err: fmt.Errorf("tool %s: schema: %w", t.Name, err)}
	}
	return compiledSchema{schema: s, sha256: hex.EncodeToString(sum[:])}
}

// validate checks canonical arguments against the schema, returning ErrInvalidArguments naming the
// failing location.
func (c compiledSchema) validate(canonical []byte) error {
	if c.err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArguments, c.err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(canonical))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	if err := c.schema.Validate(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	return nil
}

// CheckSchemas compiles every tool's schema and returns the first error, ordered by tool name; nil
// when all compile. The boundary refuses calls of a tool whose schema does not compile.
func CheckSchemas(tools map[string]Tool) error {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if c := compileSchema(tools[n]); c.err != nil {
			return c.err
		}
	}
	return nil
}

// ReadOnlyNames returns the names of the ReadOnly tools among tools, sorted.
func ReadOnlyNames(tools map[string]Tool) []string {
	var out []string
	for n, t := range tools {
		if t.Access == ReadOnly {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// reviewerRoles are the roles that review rather than implement: they get read-only tools by
// default (FORMATIONS.md roles; DESIGN.md vocabulary).
var reviewerRoles = []string{"reviewer", "critic", "judge"}

// DefaultAllowedTools returns the tools a member gets when its spec lists none: the read-only tools
// for a reviewer, critic or judge (by domain or formation role), and the read-only tools plus
// write_file and edit_file for everyone else. execute, network and mixed tools are never granted
// by default; a spec must name them.
func DefaultAllowedTools(tools map[string]Tool, domainRole, formationRole string) []string {
	out := ReadOnlyNames(tools)
	if IsReviewer(domainRole, formationRole) {
		return out
	}
	for _, n := range []string{"write_file", "edit_file"} {
		if _, ok := tools[n]; ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// IsReviewer reports whether a member with these roles reviews (and so is read-only by default).
func IsReviewer(domainRole, formationRole string) bool {
	return slices.Contains(reviewerRoles, domainRole) || slices.Contains(reviewerRoles, formationRole)
}
