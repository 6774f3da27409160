'use client'
/**
 * A modal confirmation: the browser's own <dialog> opened with showModal(),
 * so the page behind it is inert (focus is trapped inside) and Escape closes
 * it; focus starts on the element marked `data-autofocus` (the safe choice)
 * and returns to the control that opened it.
 */
import { useEffect, useRef, type ReactNode } from 'react'

export function ConfirmDialog({ open, label, onClose, children }: { open: boolean; label: string; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDialogElement>(null)
  const opener = useRef<Element | null>(null)
  useEffect(() => {
    const d = ref.current
    if (!d) return
    if (open && !d.open) {
      opener.current = document.activeElement
      d.showModal()
      // The safe choice has the focus first (showModal would focus the first button, a destructive one).
      d.querySelector<HTMLElement>('[data-autofocus]')?.focus()
    } else if (!open && d.open) d.close()
  }, [open])
  return (
    <dialog
      ref={ref}
      className="confirm"
      aria-label={label}
      // Escape: the page hears it at once. The 'close' event comes a task later, and a click on the opener
      // in between (Escape, then Enter at once) would find the page still thinking the dialog open, and be lost.
      onCancel={() => onClose()}
      onClose={() => {
        // A late 'close' of a dialog opened again since: not this one's.
        if (ref.current?.open) return
        onClose()
        // Back to the opener, unless the page already put focus somewhere (an action's result).
        const active = document.activeElement
        const o = opener.current
        if ((!active || active === document.body) && o instanceof HTMLElement && o.isConnected && !o.hasAttribute('disabled')) o.focus()
      }}
    >
      {open ? children : null}
    </dialog>
  )
}
