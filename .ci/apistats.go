//go:build ignore

// apistats prints the size of rebound's public surface: exported names
// (funcs, methods, types, consts, vars), options (exported funcs whose
// result type's name ends in "Option"), non-test lines, functions over 80
// lines and non-test files over 600 lines, per package and in all, and the
// average words per sentence of the doc comments of exported names. Library
// packages are every package but internal/, examples/ and the test servers
// (nacostest, etcdtest, subscribertest, pgtest).
//
//	go run .ci/apistats.go [-v] [-doc] [-list]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func skip(dir string) bool {
	for _, p := range strings.Split(dir, string(filepath.Separator)) {
		switch p {
		case "internal", "examples", "testdata", "nacostest", "etcdtest", "subscribertest", "pgtest", ".ci", ".git":
			return true
		}
	}
	return false
}

type stats struct {
	names, options, lines, longFuncs, bigFiles int
	words, sentences                           int // of the doc comments of exported names
}

// countDoc adds the words and sentences of a doc comment to s.
func (s *stats) countDoc(g *ast.CommentGroup) {
	if g == nil {
		return
	}
	for _, para := range strings.Split(g.Text(), "\n\n") {
		if strings.HasPrefix(para, "\t") || strings.HasPrefix(para, "  ") {
			continue // code or a list's indented block
		}
		words := strings.Fields(para)
		if len(words) == 0 {
			continue
		}
		s.words += len(words)
		n := 0
		for i, w := range words {
			if strings.HasSuffix(w, ".") || strings.HasSuffix(w, ":") && i == len(words)-1 || strings.HasSuffix(w, "?") {
				n++
			}
		}
		s.sentences += max(n, 1)
	}
}

func main() {
	verbose := flag.Bool("v", false, "list long functions and big files")
	docLines := flag.Bool("doc", false, "also count the lines of go doc -all")
	list := flag.Bool("list", false, "list every exported name (package.Name, package.Type.Method), nothing else")
	flag.Parse()
	per := map[string]*stats{}
	fset := token.NewFileSet()
	filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && skip(path) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		dir := filepath.Dir(path)
		s := per[dir]
		if s == nil {
			s = &stats{}
			per[dir] = s
		}
		n := fset.File(f.Pos()).LineCount()
		s.lines += n
		if n > 600 {
			s.bigFiles++
			if *verbose {
				fmt.Printf("file %s: %d lines\n", path, n)
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				body := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
				if body > 80 {
					s.longFuncs++
					if *verbose {
						fmt.Printf("func %s %s: %d lines\n", path, d.Name.Name, body)
					}
				}
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil && !exportedRecv(d.Recv.List[0].Type) {
					continue
				}
				s.names++
				s.countDoc(d.Doc)
				if *list {
					name := d.Name.Name
					if d.Recv != nil {
						name = recvName(d.Recv.List[0].Type) + "." + name
					}
					fmt.Println(dir + "." + name)
				}
				if d.Recv == nil && d.Type.Results != nil && len(d.Type.Results.List) == 1 {
					if id, ok := d.Type.Results.List[0].Type.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Option") {
						s.options++
					}
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() {
							s.names++
							if *list {
								fmt.Println(dir + "." + sp.Name.Name)
							}
							if sp.Doc != nil {
								s.countDoc(sp.Doc)
							} else {
								s.countDoc(d.Doc)
							}
						}
					case *ast.ValueSpec:
						for _, id := range sp.Names {
							if id.IsExported() {
								s.names++
								if *list {
									fmt.Println(dir + "." + id.Name)
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	if *list {
		return
	}
	var dirs []string
	for d := range per {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var t stats
	fmt.Printf("%-28s %6s %7s %6s %9s %9s %14s\n", "package", "names", "options", "lines", "funcs>80", "files>600", "words/sentence")
	for _, d := range dirs {
		s := per[d]
		fmt.Printf("%-28s %6d %7d %6d %9d %9d %14.1f\n", d, s.names, s.options, s.lines, s.longFuncs, s.bigFiles, float64(s.words)/float64(max(s.sentences, 1)))
		t.names += s.names
		t.options += s.options
		t.lines += s.lines
		t.longFuncs += s.longFuncs
		t.bigFiles += s.bigFiles
		t.words += s.words
		t.sentences += s.sentences
	}
	fmt.Printf("%-28s %6d %7d %6d %9d %9d %14.1f\n", "all", t.names, t.options, t.lines, t.longFuncs, t.bigFiles, float64(t.words)/float64(max(t.sentences, 1)))
	if *docLines {
		n := 0
		for _, d := range dirs {
			out, err := exec.Command("go", "doc", "-all", "./"+d).Output()
			if err != nil {
				fmt.Printf("go doc -all ./%s: %v\n", d, err)
			}
			n += strings.Count(string(out), "\n")
		}
		fmt.Printf("go doc -all lines: %d\n", n)
	}
}

func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

func exportedRecv(e ast.Expr) bool { return ast.IsExported(recvName(e)) }
