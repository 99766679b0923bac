package verify

import (
	"regexp"
	"slices"

	"github.com/capstan-dev/capstan/internal/lazyre"
)

// runnerConfig are, per test runner, the globs of the files in a work dir
// that the runner (or the tool that starts it) reads for its
// configuration or its own code, from each tool's documented lookup:
//
//   - go: go.work and go.work.sum (which modules build), vendor/modules.txt
//     (with it, go builds the vendored copies of the dependencies), and the
//     vendored copies of the assertion libraries tests use (testify,
//     go-cmp, gotest.tools, ginkgo and gomega, quicktest), which decide
//     whether a test fails. go.mod and
//     go.sum are left to runner.verification.protect: honest changes add
//     dependencies. GOFLAGS and the go env file are not in the work dir (the
//     validators' go env file is pinned when the run starts).
//   - pytest: the ini files it looks for, in its order (pytest.ini,
//     .pytest.ini, then pyproject.toml, tox.ini and setup.cfg, which are left
//     to runner.verification.protect like go.mod), in the work dir and any
//     folder under it (rootdir is the first folder up from the arguments that
//     has one); conftest.py files, which it imports from the rootdir down;
//     and what a `python -m pytest` run finds on its path (the work dir
//     itself, not its folders): *.dist-info folders and *.egg-info entry
//     points (a pytest11 entry point is a plugin pytest loads), *.pth
//     files, sitecustomize.py / usercustomize.py, and modules named like
//     pytest or the packages it imports (pytest, _pytest, pluggy,
//     iniconfig, py: a pytest.py, a .pyc or an extension module, or a
//     package folder), which `python -m pytest` imports from the work dir
//     before the installed ones, since -m puts the current directory
//     first on sys.path. For the same reason `python -m unittest`: a
//     unittest module or package in the work dir.
//   - jest: jest.config.{js,ts,mjs,cjs,json}, babel.config.* and .babelrc*
//     (its default transform).
//   - vitest: vitest.config.*, vitest.workspace.*, vite.config.* (vitest
//     reads the vite config when it has none of its own).
//   - jest, vitest and every npm-started runner: node_modules/.bin (the
//     runner that npx, npm test and a ./node_modules/.bin/… command start),
//     the test runners' own packages in node_modules (jest, jest-*,
//     @jest/*, babel-jest and expect, its assertions; vitest, @vitest/*,
//     vite, and chai, which vitest's expect is built on; mocha), which git
//     does not see when node_modules is ignored, the lockfiles that decide
//     what npx and npm ci install, and the project .npmrc (node-options,
//     script-shell).
//   - cargo: .cargo/config and .cargo/config.toml (runner, rustflags),
//     rust-toolchain and rust-toolchain.toml, Cargo.lock.
var runnerConfig = []struct {
	find  func() *regexp.Regexp
	globs []string
}{
	{lazyre.New(`\bgo test\b`), []string{"**/go.work", "**/go.work.sum", "**/vendor/modules.txt",
		"**/vendor/github.com/stretchr/testify/**", "**/vendor/github.com/google/go-cmp/**", "**/vendor/gotest.tools/**",
		"**/vendor/github.com/onsi/**", "**/vendor/github.com/frankban/quicktest/**"}},
	{lazyre.New(`\bpytest\b`), []string{"**/pytest.ini", "**/.pytest.ini", "**/conftest.py",
		"*.dist-info/**", "*.egg-info/entry_points.txt", "*.pth", "sitecustomize.py", "usercustomize.py",
		"pytest.*", "pytest/**", "_pytest.*", "_pytest/**", "pluggy.*", "pluggy/**", "iniconfig.*", "iniconfig/**", "py.*", "py/**"}},
	{lazyre.New(`\bunittest\b`), []string{"unittest.*", "unittest/**"}},
	{lazyre.New(`\bjest\b`), []string{"**/jest.config.*", "**/babel.config.*", "**/.babelrc*"}},
	{lazyre.New(`\bvitest\b`), []string{"**/vitest.config.*", "**/vitest.workspace.*", "**/vite.config.*"}},
	{lazyre.New(`\b(jest|vitest|mocha|npx|(npm|yarn|pnpm|bun)( run)? test|node --test)\b`), []string{"node_modules/.bin/**",
		"**/node_modules/jest/**", "**/node_modules/jest-*/**", "**/node_modules/@jest/**", "**/node_modules/babel-jest/**", "**/node_modules/expect/**",
		"**/node_modules/vitest/**", "**/node_modules/@vitest/**", "**/node_modules/vite/**", "**/node_modules/chai/**", "**/node_modules/mocha/**",
		"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", ".npmrc"}},
	{lazyre.New(`\bcargo (test|nextest)\b`), []string{".cargo/config", ".cargo/config.toml", "rust-toolchain", "rust-toolchain.toml", "Cargo.lock"}},
}

// RunnerConfig returns the globs of the configuration files of the test
// runners that commands run (see runnerConfig for each runner's list),
// sorted, each once; nil when commands run none capstan knows.
func RunnerConfig(commands []string) []string {
	var out []string
	for _, c := range commands {
		for _, r := range runnerConfig {
			if r.find().MatchString(c) {
				out = append(out, r.globs...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
