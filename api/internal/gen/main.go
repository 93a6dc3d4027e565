package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/api/schema"
)

func main() {
	apiDir := flag.String("api", ".", "the api package's folder")
	docs := flag.String("docs", filepath.Join("..", "docs"), "the docs folder")
	flag.Parse()
	if err := run(*apiDir, *docs); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(apiDir, docs string) error {
	p, err := schema.Target()
	if err != nil {
		return err
	}
	src, err := schema.GoTables(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(apiDir, "protocol_gen.go"), src, 0o644); err != nil {
		return err
	}
	table, err := schema.MethodsJSON(p, api.Unserved)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(apiDir, "protocol_methods.json"), table, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(docs, "protocol-methods.md"), schema.MethodsDoc(p, api.Unserved), 0o644)
}
