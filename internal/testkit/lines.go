package testkit

import (
	"bufio"
	"io"
)

// Lines reads r to its end in a goroutine of its own, sending each line
// on the channel it returns (which holds up to n unread), and closes the
// channel when r ends.
func Lines(r io.Reader, n int) <-chan string {
	lines := make(chan string, n)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}
