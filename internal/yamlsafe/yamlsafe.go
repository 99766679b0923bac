// Package yamlsafe decodes YAML written by people or models that may be
// hostile: every document gets one node budget, counted with aliases and
// merge keys ("<<: [*a, *a]") expanded, checked on the parsed tree before
// anything is decoded, so a kilobyte of nested merges cannot make the
// decoder run for hours or exhaust memory. Every YAML parse in capstan goes
// through Unmarshal or CheckTree.
//
// The YAML frontmatter at the head of a Markdown file (prompt files, retry
// prompts, SKILL.md) is split from its body by SplitFrontmatter, the one
// splitter of them, before its YAML goes through Unmarshal.
package yamlsafe

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// MaxNodes is the node budget of one YAML file: the number of nodes it
// has once every alias (including those a merge key pulls in) is expanded.
const MaxNodes = 1_000_000

// BudgetError is the error for a document over MaxNodes.
type BudgetError struct{}

// Error says what was refused.
func (BudgetError) Error() string {
	return fmt.Sprintf("YAML expands to more than %d nodes through aliases and merge keys; refused before decoding", MaxNodes)
}

// Unmarshal decodes data into v like yaml.UnmarshalWithOptions, after
// checking the node budget. A decoder panic (possible on some malformed
// documents) becomes an error.
func Unmarshal(data []byte, v any, opts ...yaml.DecodeOption) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML (decoder failure: %v)", r)
		}
	}()
	tree, err := parser.ParseBytes(data, 0)
	if err != nil {
		return err
	}
	if err := CheckTree(tree); err != nil {
		return err
	}
	return yaml.UnmarshalWithOptions(data, v, opts...)
}

// CheckTree returns a BudgetError when the documents of tree expand to
// more than MaxNodes nodes.
func CheckTree(tree *ast.File) error {
	sizes := map[string]int{}
	total := 0
	for _, doc := range tree.Docs {
		total = add(total, expandedSize(doc, sizes))
		if total > MaxNodes {
			return BudgetError{}
		}
	}
	return nil
}

func add(a, b int) int {
	if a+b > MaxNodes {
		return MaxNodes + 1
	}
	return a + b
}

// expandedSize counts the nodes of n with aliases expanded, saturating just
// above MaxNodes. sizes maps anchor names to the expanded size of their
// value, in document order, as the decoder resolves them.
func expandedSize(n ast.Node, sizes map[string]int) int {
	switch x := n.(type) {
	case nil:
		return 0
	case *ast.DocumentNode:
		return expandedSize(x.Body, sizes)
	case *ast.AnchorNode:
		s := add(1, expandedSize(x.Value, sizes))
		if x.Name != nil {
			sizes[x.Name.String()] = s
		}
		return s
	case *ast.AliasNode:
		if x.Value != nil {
			return add(1, sizes[x.Value.String()])
		}
		return 1
	case *ast.TagNode:
		return add(1, expandedSize(x.Value, sizes))
	case *ast.MappingKeyNode:
		return add(1, expandedSize(x.Value, sizes))
	case *ast.MappingNode:
		total := 1
		for _, v := range x.Values {
			total = add(total, expandedSize(v, sizes))
		}
		return total
	case *ast.MappingValueNode:
		return add(add(1, expandedSize(x.Key, sizes)), expandedSize(x.Value, sizes))
	case *ast.SequenceNode:
		total := 1
		for _, v := range x.Values {
			total = add(total, expandedSize(v, sizes))
		}
		return total
	default:
		return 1
	}
}

// MergeBomb returns levels lines of YAML in which each anchor merges two
// copies of the previous one ("bN: &bN {<<: [*bN-1, *bN-1], xN: 1}"): a
// kilobyte whose naive decoding takes 2^levels steps. Tests of every YAML
// reader use it.
func MergeBomb(levels int) string {
	var b strings.Builder
	b.WriteString("b0: &b0 {x0: 1}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "b%d: &b%d {<<: [*b%d, *b%d], x%d: 1}\n", i, i, i-1, i-1, i)
	}
	return b.String()
}
