package spec

import (
	"io/fs"
	"os"
	"path/filepath"
)

// FindSkills returns every folder below root (root included) that holds a
// SKILL.md, sorted, not descending into a skill, .git or node_modules.
func FindSkills(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // unreadable corners are skipped
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "__pycache__") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(p, SkillFile)); err == nil {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	return out, err
}
