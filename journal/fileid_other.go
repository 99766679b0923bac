//go:build !unix

package journal

import "os"

// fileID identifies a file (os.SameFile compares what Stat returned).
type fileID struct{ fi os.FileInfo }

func idOf(f *os.File) (fileID, error) {
	fi, err := f.Stat()
	return fileID{fi}, err
}

func pathID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	return fileID{fi}, err
}

// same is fileID equality for FileInfos.
func (a fileID) same(b fileID) bool { return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) }

// linksOf returns 0 (unknown): the platform's FileInfo has no link
// count, so the writer checks the journal's path before every event there
// (Writer.stillThere).
func linksOf(*os.File) (uint64, error) { return 0, nil }

// noFollow is 0: the platform has no flag to refuse a symbolic link.
const noFollow = 0
