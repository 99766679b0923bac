// Package markdown reads the parts of Markdown files capstan looks for:
// the fenced code blocks of a model's answer (CodeBlocks) and the leading
// YAML frontmatter of prompt files, retry prompts and SKILL.md files
// (SplitFrontmatter, the one splitter of them).
package markdown
