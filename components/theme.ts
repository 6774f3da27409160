'use client'
/**
 * Light or dark: the system's choice, unless the user picked one with the
 * toggle in the header (remembered in localStorage). The choice is the
 * `data-theme` attribute of <html>, which the stylesheet reads; components
 * that draw on a canvas (the graph) subscribe to it.
 */
import { useEffect, useState } from 'react'
import type { Theme } from './graph-style'

const KEY = 'kiln.theme'
const listeners = new Set<(t: Theme) => void>()

function systemTheme(): Theme {
  return typeof window !== 'undefined' && window.matchMedia?.('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'
}

export function chosenTheme(): Theme | null {
  if (typeof window === 'undefined') return null
  const v = localStorage.getItem(KEY)
  return v === 'dark' || v === 'light' ? v : null
}

export function currentTheme(): Theme {
  return chosenTheme() ?? systemTheme()
}

/** Applies the theme to the document (at start and on every change). */
export function applyTheme(choice: Theme | null) {
  if (choice) localStorage.setItem(KEY, choice)
  else localStorage.removeItem(KEY)
  const t = choice ?? systemTheme()
  document.documentElement.dataset.theme = t
  for (const l of listeners) l(t)
}

export function useTheme(): Theme {
  const [t, setT] = useState<Theme>('light')
  useEffect(() => {
    setT(currentTheme())
    listeners.add(setT)
    const mq = window.matchMedia?.('(prefers-color-scheme: dark)')
    const onSystem = () => !chosenTheme() && applyTheme(null)
    mq?.addEventListener('change', onSystem)
    return () => {
      listeners.delete(setT)
      mq?.removeEventListener('change', onSystem)
    }
  }, [])
  return t
}
